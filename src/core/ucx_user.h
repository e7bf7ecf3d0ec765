/*
 * The UCX settings the user made, which ucxp2p never overrides: UCX_*
 * variables of the environment, and the lines of the configuration files
 * UCX reads when it loads. UCX 1.13 reads, in this order, a later file
 * overriding an earlier one and the environment overriding them all:
 *   /etc/ucx/ucx.conf (its sysconfdir: Debian's), <libucs directory>/../etc/ucx.conf,
 *   $HOME/ucx.conf, $UCX_CONFIG_DIR/ucx.conf, ./ucx.conf (the working
 *   directory's; checked with ucx_info -c: it wins over the others)
 * and <libucs directory>/../etc/ucx/ucx.conf is read after the first, for
 * a UCX built from source (its sysconfdir under its prefix) and for newer
 * UCX, which moved its library-relative file there. Reading a file UCX
 * does not read only makes ucxp2p leave a default of its own unset.
 * A line is "UCX_NAME = value" (or "UCX_NAME : value"), read as UCX's ini
 * parser reads it: whitespace around name and value dropped, lines that
 * start with ';' or '#' are comments, " ;" starts an inline comment, names
 * are case-sensitive and only UCX_* ones count, [section] lines are
 * ignored (1.13 applies the lines under them everywhere). The files are
 * read once per process, as UCX reads them once (./ucx.conf: in the working
 * directory at their first use -- a p2p_context_create, or an info query
 * such as the rail plan before one -- where UCX reads it when it loads).
 */
#ifndef UCXP2P_CORE_UCX_USER_H
#define UCXP2P_CORE_UCX_USER_H

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ucxp2p {

struct UcxUserValue {
    std::string value;
    std::string file;  /**< the config file it came from; "" = environment */
};

using UcxConf = std::map<std::string, UcxUserValue>;

/** The UCX_* lines of one file's text into *out (a name already there is
 *  overridden, as a later file overrides an earlier one). */
void ucx_conf_parse(const std::string &text, const std::string &file, UcxConf *out);

/** The files UCX 1.13 reads, in its order; home, config_dir: the values of
 *  HOME and UCX_CONFIG_DIR (nullptr or "": skipped); lib_dir: the directory
 *  of libucs ("": skipped). */
std::vector<std::string> ucx_conf_paths(const char *home, const char *config_dir,
                                        const std::string &lib_dir);

/** The UCX_* settings of this process's UCX config files (read once;
 *  missing or unreadable files are skipped). */
const UcxConf &ucx_conf_settings();

/** `name` and the other names UCX 1.13 reads into that variable (its
 *  aliases, `ucx_info -caf`: UCX_MAX_RNDV_LANES for UCX_MAX_RNDV_RAILS,
 *  UCX_MAX_EAGER_LANES for UCX_MAX_EAGER_RAILS), or that override it for
 *  one transport (UCX_MM_<X>: UCX_POSIX_<X>, UCX_SYSV_<X>, UCX_XPMEM_<X>,
 *  which inherit it); just `name` for most. A user who set any of them
 *  set that setting. */
std::vector<std::string> ucx_names(const std::string &name);

/** The user's value of the UCX variable `name` ("UCX_TLS"), under that
 *  name or one of its aliases: the environment's, else a config file's;
 *  nullptr when neither sets it.
 *  *file (when given) is "" for the environment, else the file's path;
 *  *which (when given) the name found (one of ucx_names(name)). */
const char *ucx_user_value(const char *name, std::string *file = nullptr,
                           std::string *which = nullptr);

/** Every UCX_* setting of the user: the config files' merged with the
 *  environment's, which win; by name. */
UcxConf ucx_user_settings();

} // namespace ucxp2p

#endif
