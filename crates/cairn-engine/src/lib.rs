//! the deduplicating engine: backup, dedup, containers, recipes, catalog, restore, check
