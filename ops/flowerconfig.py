"""Flower configuration for `celery -A workers.app flower --conf=ops/flowerconfig.py`.

`nightshift flower` applies the same options itself (and also puts /metrics behind
authentication); use this file when you run Flower directly.
"""

from workers.flower import options
from workers.settings import Settings

globals().update(options(Settings.from_env()))
