"""The Hermes Agent adapter (``register(ctx)``, called through ``qmem/__init__.py``).

``adapter`` registers the tools, commands, skill and the provider-request middleware; ``request``
is what qmem adds to one provider request, in each shape Hermes sends (pure); ``turns`` which
turns get automatic recall, and the one block each gets.
"""
