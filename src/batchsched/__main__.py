import sys

from batchsched.commands.cli import main

sys.exit(main())
