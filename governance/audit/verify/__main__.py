"""`python -m governance.audit.verify`: the offline verifier's command line."""

import sys

from governance.audit.verify.cli import main

if __name__ == "__main__":  # importing the package's modules (as the import checks do) runs nothing
    sys.exit(main())
