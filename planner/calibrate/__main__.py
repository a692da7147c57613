from planner.calibrate.run import main

raise SystemExit(main())
