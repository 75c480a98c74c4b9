// Migration 32: the change log, SQLite's way of announcing changes to other processes (issue 40: `broker server
// --workers N` on the embedded store). PostgreSQL announces with triggers and NOTIFY (migration 7 and later); here the
// same triggers, table for table and event for event (only what ends or changes a session, not the last-seen touches),
// append the same announcement to `change_log`, which every worker reads on a short interval
// (store/sqlite-change-log.ts). One process alone reads nothing from it; the rows are pruned a minute after they were
// written. A later migration that adds an announcing trigger on PostgreSQL adds its SQLite twin in the same shape.

import type { Migration } from "./migration.ts";

export const CHANGE_LOG_MIGRATIONS: readonly Migration[] = [
  {
    version: 32,
    name: "change-log",
    sql: "",
    // `at`: milliseconds since the epoch by SQLite's own clock (its unixepoch() is newer than some builds).
    sqliteOnly: [
      "CREATE TABLE change_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, payload TEXT NOT NULL, at INTEGER NOT NULL)",
      "CREATE TRIGGER vaults_update_logged AFTER UPDATE ON vaults FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER vaults_delete_logged AFTER DELETE ON vaults FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', OLD.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER credentials_insert_logged AFTER INSERT ON credentials FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER credentials_update_logged AFTER UPDATE ON credentials FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER credentials_delete_logged AFTER DELETE ON credentials FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', OLD.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER services_insert_logged AFTER INSERT ON services FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER services_update_logged AFTER UPDATE ON services FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER services_delete_logged AFTER DELETE ON services FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', OLD.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER vault_members_insert_logged AFTER INSERT ON vault_members FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER vault_members_update_logged AFTER UPDATE ON vault_members FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER vault_members_delete_logged AFTER DELETE ON vault_members FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', OLD.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER agent_grants_insert_logged AFTER INSERT ON agent_grants FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER agent_grants_update_logged AFTER UPDATE ON agent_grants FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER agent_grants_delete_logged AFTER DELETE ON agent_grants FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', OLD.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER budgets_insert_logged AFTER INSERT ON budgets FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER budgets_update_logged AFTER UPDATE ON budgets FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', NEW.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER budgets_delete_logged AFTER DELETE ON budgets FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'vault', 'id', OLD.vault_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER sessions_update_logged AFTER UPDATE OF revoked_at, expires_at, role ON sessions FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'session', 'id', NEW.token_hash), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER sessions_delete_logged AFTER DELETE ON sessions FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'session', 'id', OLD.token_hash), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER users_update_logged AFTER UPDATE ON users FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'principal', 'id', NEW.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER users_delete_logged AFTER DELETE ON users FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'principal', 'id', OLD.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER agents_update_logged AFTER UPDATE ON agents FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'principal', 'id', NEW.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER agents_delete_logged AFTER DELETE ON agents FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'principal', 'id', OLD.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER ca_certs_insert_logged AFTER INSERT ON ca_certs FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'ca', 'id', NEW.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER ca_certs_update_logged AFTER UPDATE ON ca_certs FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'ca', 'id', NEW.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER ca_certs_delete_logged AFTER DELETE ON ca_certs FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'ca', 'id', OLD.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER settings_insert_logged AFTER INSERT ON settings FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'settings', 'id', NEW.name), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER settings_update_logged AFTER UPDATE ON settings FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'settings', 'id', NEW.name), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER settings_delete_logged AFTER DELETE ON settings FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'settings', 'id', OLD.name), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER secret_store_connections_insert_logged AFTER INSERT ON secret_store_connections FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'secret_store', 'id', NEW.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER secret_store_connections_update_logged AFTER UPDATE ON secret_store_connections FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'secret_store', 'id', NEW.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER secret_store_connections_delete_logged AFTER DELETE ON secret_store_connections FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'secret_store', 'id', OLD.id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER secret_store_shares_insert_logged AFTER INSERT ON secret_store_shares FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'secret_store', 'id', NEW.connection_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER secret_store_shares_update_logged AFTER UPDATE ON secret_store_shares FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'secret_store', 'id', NEW.connection_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER secret_store_shares_delete_logged AFTER DELETE ON secret_store_shares FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'secret_store', 'id', OLD.connection_id), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER workload_issuers_insert_logged AFTER INSERT ON workload_issuers FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'settings', 'id', NEW.name), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER workload_issuers_update_logged AFTER UPDATE ON workload_issuers FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'settings', 'id', NEW.name), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER workload_issuers_delete_logged AFTER DELETE ON workload_issuers FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'settings', 'id', OLD.name), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER workload_bindings_insert_logged AFTER INSERT ON workload_bindings FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'settings', 'id', NEW.name), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER workload_bindings_update_logged AFTER UPDATE ON workload_bindings FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'settings', 'id', NEW.name), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
      "CREATE TRIGGER workload_bindings_delete_logged AFTER DELETE ON workload_bindings FOR EACH ROW BEGIN INSERT INTO change_log (payload, at) VALUES (json_object('t', 'settings', 'id', OLD.name), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)); END",
    ],
  },
];
