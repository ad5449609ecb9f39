from memnet.cli import main

raise SystemExit(main())
