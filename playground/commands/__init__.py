"""The command line: ``python app.py`` (serve), ``batch``, ``qa``; shared flags in cli.py."""
