"""`python -m privrl.client` is the `privrl` command."""

from privrl.client.cli import main

raise SystemExit(main())
