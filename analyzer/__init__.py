"""psrec.analyzer: turns .psr recordings into reports and exports.

Its rooms, each importing only from those before it (tests/unit/test_import_graph.py keeps
them so). The model: what a view asks for (view.py; its modes declared once in modes.py), the
shared types and the cells' columns (model.py), the engines that sum a selection (engine.py,
native or pyengine.py behind one protocol; walks.py over stacks by report key), the task
snapshots replayed (task_states.py) and the logical stacks made from them (logical.py), a
recording read once (loading.py, messages.py) into a Profile (profile.py: what the recording
says and what the selection sums), how its stacks are named (stack_names.py), and its asyncio
tasks (tasks.py). What the outputs share: the output interface and registry (registry.py) and
what several outputs write alike (common.py). The outputs, one module per format, none
importing another: reporters.py (table, pstats, collapsed, slices), task_report.py (--tasks),
page.py (HTML), speedscope.py, firefox.py, pprof.py (with proto/), parquet.py, diff.py. On
top: the built-in outputs listed (outputs.py), the commands and their options (cli.py,
cli_options.py), and `psrec.load` (api.py, on the model).
"""
