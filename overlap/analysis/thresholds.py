"""Default thresholds, as constants without numpy or pandas, so that the command line can show
them in `--help` without importing the analysis. Where they are applied (and re-exported):

* `overlap.analysis.overlap`: a transfer is hidden when at least DEFAULT_HIDDEN_THRESHOLD of
  its span overlaps compute, exposed when at most DEFAULT_EXPOSED_THRESHOLD does, partial in
  between; tables list DEFAULT_TOP rows.
* `overlap.report.gate` (`overlap check`): the minimum overlap ratio, and against a baseline
  the largest ratio drop, the largest relative growth of exposed time and the slack (ms)
  under which a growth is noise.
"""

from __future__ import annotations

DEFAULT_HIDDEN_THRESHOLD = 0.9
DEFAULT_EXPOSED_THRESHOLD = 0.1
DEFAULT_TOP = 10

DEFAULT_MIN_OVERLAP = 0.9
DEFAULT_MAX_RATIO_DROP = 0.02
DEFAULT_MAX_EXPOSED_GROWTH = 0.05
DEFAULT_EXPOSED_SLACK_MS = 0.01
