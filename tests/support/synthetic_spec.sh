# Sourced by the tests and benchmarks that run hpctrain-worker on synthetic data.
#   synthetic_spec [SECTION.KEY=VALUE | -SECTION.KEY]...
# prints a job spec (TOML) on stdout: [data] synthetic = true, workers = 1; [model] arch =
# "resnet20", num_classes = 10; then each argument in order. SECTION.KEY=VALUE sets KEY in
# [SECTION] (the last dot splits them: train.optimizer.lr=0.05 is lr in [train.optimizer]), in
# place when it is already set; -SECTION.KEY removes KEY (a default too). VALUE is written as TOML
# when it is true, false, a number, or begins with " ' [ {; anything else becomes a string
# (job.time=00:20:00 is "00:20:00"; a string that looks like a number is passed quoted: '"7"').
# Sections come in the order job, job.env, data, model, train, train.optimizer, train.schedule,
# checkpoint, preemption, resilience, then any other in the order first named; keys in the order
# first set, one `key = value` per line (some tests edit the file with sed).
synthetic_spec() {
  local -a sections=(job job.env data model train train.optimizer train.schedule checkpoint
                     preemption resilience)
  local -a keys=(data.synthetic data.workers model.arch model.num_classes)
  local -A values=([data.synthetic]=true [data.workers]=1 [model.arch]='"resnet20"'
                   [model.num_classes]=10) known=()
  local arg key value section
  for key in "${keys[@]}"; do known[$key]=1; done
  for arg in "$@"; do
    case $arg in
      -?*.?*) unset 'values[${arg#-}]'; continue ;;
      ?*.?*=?*) key=${arg%%=*} value=${arg#*=} ;;
      *) echo "synthetic_spec: '$arg' is neither SECTION.KEY=VALUE nor -SECTION.KEY" >&2
         return 2 ;;
    esac
    case $value in
      true | false | [\"\'[\{]*) ;;
      *) [[ $value =~ ^[+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$ ]] ||
           { value=${value//\\/\\\\}; value=\"${value//\"/\\\"}\"; } ;;
    esac
    values[$key]=$value
    [[ -n ${known[$key]:-} ]] || { keys+=("$key"); known[$key]=1; }
    [[ " ${sections[*]} " == *" ${key%.*} "* ]] || sections+=("${key%.*}")
  done
  for section in "${sections[@]}"; do
    local header="[$section]"
    for key in "${keys[@]}"; do
      [[ ${key%.*} == "$section" && -v values[$key] ]] || continue
      [[ -n $header ]] && { echo "$header"; header=; }
      printf '%s = %s\n' "${key##*.}" "${values[$key]}"
    done
  done
}
