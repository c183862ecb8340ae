"""What ``python3 -m qmem.admin`` does: curating the recall collection.  Human-operated; nothing on
the runtime path imports this folder (``tests/test_invariants.py``).

``args`` is the admin command line and its checks before any I/O; ``context`` what every command
is given; ``qdrant`` the admin's two Qdrant clients (a writer for the destination, a read-only
projection of the source); ``create`` is ``init``; ``status`` a read-only look at everything
the lanes depend on; ``importrun`` one ``import-hermes`` run, planned then written exactly;
``hermespoint`` what one Hermes point becomes; ``plan`` the plan and its id; ``canonjson`` the
canonical JSON (RFC 8785) the plan id hashes; ``render`` the text a person reads.
"""
