from local_mode.cli import main

raise SystemExit(main())
