"""The local index's parts: the one SQLite file that answers when the gateway cannot, and holds
the outbox.  :mod:`qmem.localindex` is its owner and the only door other lanes use for its
tables; nothing here is imported by the recall lane.

``file`` opens the file safely (writable, read-only, never another program's); ``schema`` says
which files are qmem's and upgrades them; ``rows`` holds the row statements (only the owner
composes them); ``record`` is the record model and how what is learned merges; ``search`` and
``lexical`` rank a ``find``; ``outbox`` queues writes until the gateway takes them;
``sessionimport`` learns records from pi and Prime session files.
"""
