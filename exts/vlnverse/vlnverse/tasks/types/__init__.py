"""The built-in task types, one folder (subpackage) each: ``<type>/generator.py`` (the
``TaskGenerator`` with its scoring declaration), ``<type>/templates.py`` (its instruction template
set) and ``<type>/config.yaml`` (its default ``TaskConfig``); ``goals`` holds helpers they share.

``vlnverse.tasks.registry`` finds the folders (:func:`~vlnverse.tasks.registry.builtin_task_types`,
no name list) and names them lazily; importing a folder's package registers its task type and its
template set. This package imports none of them.
"""
