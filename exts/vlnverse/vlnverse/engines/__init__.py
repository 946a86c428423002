"""The parallel engines that run ``vlnverse.core.jobs`` jobs, one module each, registered in
``core.jobs.ENGINES`` by name: ``local`` (worker processes, or this process with one worker) and
``ray`` (actors on a Ray cluster)."""
