"""The host side: what every adapter (the pi/Prime bridge, the MCP server, Hermes) shares, so that
no adapter holds memory logic.

``session`` is one host session (the tools, hooks and commands an adapter relays); ``tools``
the tools and commands qmem offers, as data; ``rules`` the "qmem rules" block; ``commands``
``/qmem:config`` and ``/qmem:local``; ``identity`` which host loaded the shim; ``recallservices``
what the recall lane is given, and nothing more; ``recalljobs`` a prompt's recall as a background
job and the calls it runs at once.
"""
