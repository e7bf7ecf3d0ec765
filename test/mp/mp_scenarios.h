/*
 * Scenarios of mp_rank; each returns only when everything it checked was
 * right (failures exit through MP_FAIL). argc/argv are the arguments after
 * the scenario name.
 */
#ifndef UCXP2P_TEST_MP_SCENARIOS_H
#define UCXP2P_TEST_MP_SCENARIOS_H

namespace mp {

void run_alltoall(int argc, char **argv);
void run_unexpected(int argc, char **argv);
void run_shuffle(int argc, char **argv);
void run_idle(int argc, char **argv);
void run_batch(int argc, char **argv);
void run_truncate(int argc, char **argv);
void run_threads(int argc, char **argv);
void run_killee(int argc, char **argv);
void run_shutdown(int argc, char **argv);
void run_dead_arrived(int argc, char **argv);
void run_dead_first(int argc, char **argv);
void run_linger_flush(int argc, char **argv);
void run_leave(int argc, char **argv);
void run_leave_oom(int argc, char **argv);
void run_cma_fallback(int argc, char **argv);
void run_cma_withdraw(int argc, char **argv);
void run_cma_auto_order(int argc, char **argv);
void run_cma_split_wait(int argc, char **argv);
void run_stopped_peer(int argc, char **argv);
void run_fifo_room(int argc, char **argv);
void run_stalled_bulk(int argc, char **argv);
void run_soak(int argc, char **argv);
void run_shared_window(int argc, char **argv);
void run_comm_churn(int argc, char **argv);
void run_comm_race(int argc, char **argv);
void run_cma_map_free(int argc, char **argv);
void run_cma_forked(int argc, char **argv);
void run_cancel(int argc, char **argv);
void run_gone_churn(int argc, char **argv);
void run_gone_late(int argc, char **argv);
void run_linger(int argc, char **argv);
void run_linger_killed(int argc, char **argv);
void run_cma_split_destroy(int argc, char **argv);
void run_copy_unlocked(int argc, char **argv);
void run_cma_copy_fails(int argc, char **argv);
void run_kill_stream(int argc, char **argv);
void run_stream_in(int argc, char **argv);
void run_first_connect_gone(int argc, char **argv);

} // namespace mp

#endif
