"""The overlap dashboard as a WSGI application: `server` is what a WSGI server loads.

    OVERLAP_DASHBOARD_LOGDIRS=/data/runs OVERLAP_DASHBOARD_HOSTS=perf-box.example.com \\
        gunicorn --chdir dashboard --bind 0.0.0.0:8050 wsgi:server

The app itself is `overlap.dashboard` (installed with the package; this folder is not a
package and is not installed); the environment it reads, the Host check and what it writes
(nothing under the log directories) are in `overlap.dashboard.serve` and README.md here.
"""

from overlap.dashboard.serve import wsgi

server = wsgi()
