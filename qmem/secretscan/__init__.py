"""The credential scanner: a precision-oriented scan of text for credentials, and what the setup
is told about its own keys.

``engine`` scans and redacts; ``families`` is the table of credential families (the patterns
that find each and the checks that confirm it); ``values`` judges whether a value reads as a
credential; ``shapes`` checks credentials known by their own shape, ``context`` those known by
their setting; ``seedphrase`` recognises BIP39 seed phrases (the English word list and its
licence ship beside it); ``audit`` is how ``doctor`` and ``admin status`` look at the setup's
credentials.
"""
