"""report: one analysis result -> what a user reads.

In: result dicts from `overlap.analysis`. Out: text (`text`), a self-contained HTML page
(`html`), the CI gate with JUnit and GitHub step summary (`gate`), and the plotly figures
(`figures`, over `aggregate` and `rundata`) that the HTML page and the dashboard both draw.
"""
