import sys

from batchsched.cli import main

sys.exit(main())
