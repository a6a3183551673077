"""Entry file for spark-submit, which runs a script rather than a module:

    spark-submit --master spark://host:7077 analytics/submit.py analyze --data-dir s3://bucket/kafka --out s3://bucket/report

The session takes the master spark-submit chose; our packages are shipped to the executors.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from analytics.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
