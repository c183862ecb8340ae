"""The fence around recalled memory: one untrusted ``<memory-context>`` block, which nothing in it
can close, open or imitate.

``memorycontext`` renders the block (pure functions); ``lookalikes`` is the fence's data: which
characters it treats as invisible, as a line break, as an angle bracket, or as a letter of the
words it guards.
"""
