"""``python -m reportfarm.simulate``: the same as ``reportfarm simulate``."""

from reportfarm.simulate import cli

raise SystemExit(cli.main())
