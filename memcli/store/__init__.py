"""Where memories live: records and their two file formats (`model`), the folders, indices
and lock (`store`), the one layer every file-system change goes through (`fsops`), the run
journal, the ops files and log, the everyday writes (`memories`) and `doctor`."""
