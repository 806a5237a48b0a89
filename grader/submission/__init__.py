"""Reading a submission: a file or a notebook's code cells, checked and classified (bytes in, script out).

Modules: load, notebook.
"""
