import sys

from planner.evaljob.run import main

sys.exit(main())
