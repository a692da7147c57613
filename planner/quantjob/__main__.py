from planner.quantjob.run import main

raise SystemExit(main())
