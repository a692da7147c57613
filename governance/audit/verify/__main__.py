import sys

from governance.audit.verify.cli import main

sys.exit(main())
