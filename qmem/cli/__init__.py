"""The command lines' parsing and rendering.

``frontend`` is what every command-line front end shares (an argparse that never exits, one
outcome written one way, exit codes); ``localargs`` and ``localrender`` are ``qmem.local``'s
command line and its text.
"""
