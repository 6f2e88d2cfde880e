"""`python -m client` is the `privrl` command."""

from client.cli import main

raise SystemExit(main())
