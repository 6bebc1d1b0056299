#!/bin/sh
# A program that looks launched but cannot reach its launcher fails at cor_init with
# COR_EBOOT and a line naming the launcher, within seconds; never a one-domain run.
#   - PMIx variables pointing at a server that is not there (nothing listens on the port)
#   - srun's variables for 4 tasks without PMIx (srun without --mpi=pmix)
# And with neither, the same program is a one-domain session.
. "$(dirname "$0")/../proc/common.sh"
H=$B/apps/examples/hello
[ -x "$H" ] || die "hello not built"
grep -q 'pmix' "$B/apps/cor-info" 2>/dev/null || true
unset COR_BOOT COR_RANK COR_SIZE COR_SESSION SLURM_STEP_NUM_TASKS OMPI_COMM_WORLD_SIZE
for v in $(env | sed -n 's/^\(PMIX_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

# expect_eboot TAG PATTERN env...: hello exits non-zero within 30 s, says PATTERN, greets nobody.
expect_eboot() {
    tag=$1 pat=$2
    shift 2
    run_bg "$tag" env "$@" timeout -k 10 30 "$H"
    wait_bg "$tag"
    [ $RC != 0 ] && [ $RC != 124 ] || { show "$tag"; die "$tag: exited $RC, expected a failure (124 = hung)"; }
    grep -q "cannot join the session (bootstrap failed)" "$WORK/$tag.err" ||
        { show "$tag"; die "$tag: no COR_EBOOT message"; }
    grep -q "$pat" "$WORK/$tag.err" || { show "$tag"; die "$tag: no line saying '$pat'"; }
    grep -q "got" "$WORK/$tag.out" && { show "$tag"; die "$tag: ran as a one-domain session"; }
    grep "bootstrap (" "$WORK/$tag.err" | sed 's/^/  /'
}

if "$B/apps/cor-info" 2>/dev/null | grep -q "bootstrap.*pmix"; then
    say "PMIx variables, server not there: PMIx_Init cannot reach it"
    port=$((40000 + $$ % 20000))
    expect_eboot deadpmix "Open MPI's mpirun started this program.*cannot be reached" \
        PMIX_NAMESPACE="prterun-x-$$@1" PMIX_RANK=0 OMPI_COMM_WORLD_SIZE=2 \
        PMIX_SERVER_URI4="prterun-x-$$@0.0;tcp4://127.0.0.1:$port" \
        PMIX_SERVER_URI3="prterun-x-$$@0.0;tcp4://127.0.0.1:$port" \
        PMIX_SERVER_URI2="prterun-x-$$@0.0;tcp4://127.0.0.1:$port"
    expect_eboot deadslurm "Slurm's srun --mpi=pmix started this program.*cannot be reached" \
        PMIX_NAMESPACE="slurm.pmix.999.0" PMIX_RANK=1 \
        PMIX_SERVER_URI21="pmix-server.1;tcp4://127.0.0.1:$port"
else
    say "PMIx variables in a libcor built without PMIx"
    expect_eboot nopmix "built without PMIx" PMIX_NAMESPACE=x PMIX_RANK=0
fi
say "srun's variables for 4 tasks, no PMIx"
expect_eboot nopmi "srun --mpi=pmix" SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=1
say "no launcher at all: a one-domain session, libpmix not loaded"
# libcor loads its PMIx backend (cor_boot_pmix.so, which links libpmix) only under a PMIx
# launcher (cor/core/boot_host.h): the dynamic loader's log must not name libpmix here, and
# must name it above (deadpmix: the backend was loaded to say the server cannot be reached).
run_bg alone env LD_DEBUG=files timeout -k 10 30 "$H"
wait_bg alone
[ $RC = 0 ] && grep -q 'domain 0 task 0 got' "$WORK/alone.out" || { show alone; die "alone: exited $RC"; }
if grep -q 'file=[^ ]*libpmix' "$WORK/alone.err"; then
    grep 'file=[^ ]*libpmix' "$WORK/alone.err" | head -3
    die "alone: libpmix was loaded although no PMIx launcher started the program"
fi
if "$B/apps/cor-info" 2>/dev/null | grep -q "bootstrap.*pmix"; then
    run_bg dl env LD_DEBUG=files PMIX_NAMESPACE="slurm.pmix.998.0" PMIX_RANK=0 \
        PMIX_SERVER_URI21="pmix-server.1;tcp4://127.0.0.1:$port" timeout -k 10 30 "$H"
    wait_bg dl
    grep -q 'file=[^ ]*cor_boot_pmix.so' "$WORK/dl.err" && grep -q 'file=[^ ]*libpmix' "$WORK/dl.err" ||
        { show dl; die "PMIx variables set: the PMIx backend and libpmix were not loaded"; }
fi
say "PASS"
