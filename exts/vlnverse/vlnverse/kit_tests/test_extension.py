"""In-Kit checks of the extension: its dependencies are enabled and the Isaac backend is registered."""
import omni.kit.test


class TestVLNVerseExtension(omni.kit.test.AsyncTestCase):
    """Run with ``omni.kit.test`` (``[[test]]`` of config/extension.toml) in an Isaac Sim app."""

    async def test_required_extensions_enabled(self):
        import omni.kit.app

        from vlnverse.extension import missing_extensions

        manager = omni.kit.app.get_app().get_extension_manager()
        self.assertEqual(missing_extensions(manager.is_extension_enabled), [])

    async def test_isaac_backend_registered(self):
        from vlnverse.sim.api import BACKENDS

        self.assertIn("isaac", BACKENDS)
        self.assertEqual(BACKENDS.get("isaac"), "vlnverse.sim.isaac:IsaacSimulator")
