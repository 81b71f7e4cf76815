# Sourced by acceptance.sh and protocols.sh: run LOG CMD... runs the command, bounded in time, with
# its output, the command line, the date and the load written to $here/LOG.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {
  log=$1
  shift
  { echo "# command: $*"; echo "# date: $(date -u '+%F %T') UTC; load: $(cut -d' ' -f1-3 /proc/loadavg)"; } >"$here/$log"
  timeout 900 "$@" >>"$here/$log" 2>&1 || echo "# exit status $?" >>"$here/$log"
}
