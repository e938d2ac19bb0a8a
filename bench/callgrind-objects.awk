# bench/callgrind-objects.awk - exclusive instruction count per ELF object
# of one callgrind output file (run_callgrind.sh): one "COUNT OBJECT" line
# per object. Reads the format's name compression ("ob=(3) /path", later
# "ob=(3)"; names may be defined on cob= lines) and skips the inclusive
# cost line that follows each calls= line.
function obj(s,   id, rest) {
    if (match(s, /^\([0-9]+\)/)) {
        id = substr(s, 2, RLENGTH - 2)
        rest = substr(s, RLENGTH + 1)
        sub(/^ /, "", rest)
        if (rest != "") name[id] = rest
        return name[id]
    }
    return s
}
/^ob=/    { ob = obj(substr($0, 4)); next }
/^cob=/   { obj(substr($0, 5)); next }
/^calls=/ { skip = 1; next }
/^[0-9+*-]/ {
    if (skip) { skip = 0; next }
    if (split($0, f, " ") >= 2) cost[ob] += f[2]
    next
}
END { for (o in cost) printf "%d %s\n", cost[o], o }
