"""gunicorn settings for the overlap dashboard: `gunicorn -c dashboard/gunicorn.conf.py`.

Each can be overridden on the command line (`--bind 0.0.0.0:8050`) or through
`GUNICORN_CMD_ARGS`; the dashboard's own settings are environment variables
(OVERLAP_DASHBOARD_LOGDIRS, OVERLAP_DASHBOARD_HOSTS; see README.md here).
"""

# The installed package's factory: works from any directory, with or without this clone.
wsgi_app = "overlap.dashboard.serve:wsgi()"
# Loopback unless told otherwise: exposing the runs on a network is a deliberate choice.
bind = "127.0.0.1:8050"
# Two workers: one slow first load (a 1M-event capture takes ~10 s to read) does not stall
# every other page. Each worker keeps its own in-memory cache; the disk cache is shared.
workers = 2
# Reading a large capture for the first time can take longer than gunicorn's default 30 s.
timeout = 300
accesslog = "-"
