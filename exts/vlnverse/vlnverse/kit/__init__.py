"""Kit-only code: what runs only inside Omniverse Kit / Isaac Sim.

* :mod:`vlnverse.kit.extension` — the extension's startup checks, backend registration and panel;
* :mod:`vlnverse.kit.panel` — the study panel's ``omni.ui`` window.

Nothing else in the package imports this one (``tests/test_layering.py``); Kit's manifest names the
entry point :mod:`vlnverse.extension`, which defines the ``omni.ext.IExt`` class on these helpers.
Every Omniverse import here happens inside functions and methods.
"""
