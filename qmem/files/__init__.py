"""Small files anyone may have put in qmem's way, read and written so that none can hang, exhaust
or crash qmem.

``smallfile`` reads a small file (a regular file only, bounded, non-blocking, depth-safe JSON);
``configfile`` reads the config file through it; ``atomicfile`` replaces a small file
crash-safely (through a link, to its target).
"""
