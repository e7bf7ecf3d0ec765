# Sourced by the shell tests that start ranks themselves: a make check run
# under srun or mpirun (or from a torchrun-style job) hands them its
# launcher's variables, which would steer their ranks' bootstrap elsewhere.
#   unset_launcher_vars        PMIX_*, OMPI_*, SLURM_*
#   unset_launcher_vars tcp    also RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
unset_launcher_vars() {
    local names='PMIX_[A-Z0-9_]*\|OMPI_[A-Z0-9_]*\|SLURM_[A-Z0-9_]*' v
    [ "${1:-}" != tcp ] || names="$names"'\|RANK\|WORLD_SIZE\|MASTER_ADDR\|MASTER_PORT'
    for v in $(env | sed -n "s/^\\($names\\)=.*/\\1/p"); do
        unset "$v"
    done
}
