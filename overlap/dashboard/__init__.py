"""The dashboard: a Dash app (`overlap dashboard`) that browses run directories and plans.

`data` turns run directories into the frames and figures the views draw (through the same
analysis and report modules as the CLI); `app` lays out the pages. It needs the `dashboard`
extra (plotly, dash); nothing else in `overlap/` imports it.
"""
