"""Screens: a job's Result as the text a terminal shows, one module per result, for the CLI and for Python alike.

Why here and not in the command line: the tables, the bottom line and the plan's answer are how a result reads, the
same in `specagent predict` and in a notebook (`print(screens.predict.answer(result, console))` or
`console.print(*...)`), so they sit with the other renderers of results (the HTML report, the figures). Each function
takes a Result (or the stored dict its `to_dict()` gives) and returns rich renderables or lines of text: it prints
nothing and prices nothing (every number is a field of the Result). A `Console` argument is only the width the tables
are fitted to (`tables.fitted`).

Nothing is imported here, so `import specagent.reports` stays free of rich; a command imports the screen it prints.
"""
