"""Small shared helpers, and GEM's ``gem.utils`` modules under the same names: ``parsing``,
``seeding``, ``constants``, ``qa_em`` and ``debug``."""
