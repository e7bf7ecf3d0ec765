/*
 * The one table of P2P_* environment variables {name, default, help}.
 * Every module reads its settings through these helpers so p2p_info and
 * p2p_config_print() show the whole configuration.
 */
#ifndef UCXP2P_CORE_CONFIG_H
#define UCXP2P_CORE_CONFIG_H

#include <ucxp2p/p2p.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ucxp2p {

struct ConfigVar {
    const char *name;
    const char *default_value;
    const char *help;
};

/** The table; terminated by an entry with name == nullptr. */
const ConfigVar *config_table();

/** Value from the environment, else the table default. A name not in the
 *  table (a programming error) is logged as an error and reads as "". */
std::string config_get(const char *name);

/** The P2P_* names set in env (NAME=value strings, nullptr-terminated,
 *  like environ) that the table lacks but that are within two edits of a
 *  name it has: likely typos. Each pair is (name set, table name). */
std::vector<std::pair<std::string, std::string>> config_misspelled(const char *const *env);

/** Warn about each config_misspelled(environ): such a variable is ignored.
 *  Context creation calls it with the context's log level; it writes once
 *  per process, at the first context whose level shows warnings. */
void config_warn_misspelled(p2p_log_level_t level);

/** Parse an unsigned integer setting; P2P_ERR_INVALID_PARAM when the
 *  value is malformed or outside [min, max], logged with that range (and
 *  keyword, when the setting also takes one the caller checked first:
 *  "is not auto or an integer in [...]"). */
p2p_status_t config_get_u64(const char *name, uint64_t max, uint64_t *out,
                            uint64_t min = 0, const char *keyword = nullptr);

/** Whether a setting's value is the keyword: every P2P_* keyword (on, off,
 *  auto, a mode or level name) is read without regard to case. */
bool config_is(const std::string &value, const char *keyword);

/** Parse an on/off setting; P2P_ERR_INVALID_PARAM (not logged) otherwise. */
p2p_status_t config_parse_on_off(const std::string &s, bool *out);

/** Parse a log level name (error|warn|info|debug|trace). */
p2p_status_t config_parse_log_level(const std::string &s, p2p_log_level_t *out);

/** Parse a progress mode name (adaptive|busy|event). */
p2p_status_t config_parse_progress(const std::string &s,
                                   p2p_progress_mode_t *out);

/** Parse a thread mode name (multi|serialized). */
p2p_status_t config_parse_thread_mode(const std::string &s, p2p_thread_mode_t *out);

} // namespace ucxp2p

#endif
