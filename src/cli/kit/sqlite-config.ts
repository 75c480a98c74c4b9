// The configuration of a command that works on the SQLite store file (`backup`, `restore`): --data-dir in
// place of BROKER_DATA_DIR, and a clear refusal when the store is PostgreSQL, naming its own tool.

import { loadConfig, type Config } from "../../config.ts";
import { CliFailure } from "./fail.ts";

export function sqliteStoreConfig(dataDir: string | undefined, refusal: { said: string; tool: string }): Config {
  const config = loadConfig(dataDir ? { ...process.env, BROKER_DATA_DIR: dataDir } : process.env);
  if (config.database) throw new CliFailure(`the store is in PostgreSQL (BROKER_DATABASE_URL is set); ${refusal.said}`, refusal.tool);
  return config;
}
