# Medians of a multirate CSV (host,T,config,run,mmsgs_per_s; header optional).
# Prints one line per (T, config) seen, sorted by T then config name:
#     T config median ok failed
# median is "nan" when no run of that cell succeeded; failed runs (NaN in the
# CSV) are left out of the median and counted in the last column.
# POSIX awk (works with mawk and gawk).
BEGIN { FS = "," }
$1 == "host" { next }
NF >= 5 {
    key = $2 SUBSEP $3
    if (!(key in seen)) { seen[key] = 1; nkeys++; keys[nkeys] = key }
    if ($5 ~ /^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/) {
        n[key]++
        v[key, n[key]] = $5 + 0
    } else {
        failed[key]++
    }
}
END {
    for (i = 1; i <= nkeys; i++) {
        key = keys[i]
        m = n[key] + 0
        # insertion sort of this cell's values
        for (a = 2; a <= m; a++) {
            x = v[key, a]
            for (b = a - 1; b >= 1 && v[key, b] > x; b--)
                v[key, b + 1] = v[key, b]
            v[key, b + 1] = x
        }
        if (m == 0)
            med = "nan"
        else if (m % 2)
            med = sprintf("%.6f", v[key, (m + 1) / 2])
        else
            med = sprintf("%.6f", (v[key, m / 2] + v[key, m / 2 + 1]) / 2)
        split(key, kv, SUBSEP)
        out[i] = sprintf("%s %s %s %d %d", kv[1], kv[2], med, m, failed[key] + 0)
        sortkey[i] = sprintf("%08d %s", kv[1], kv[2])
    }
    # sort the output lines by T, then config
    for (a = 2; a <= nkeys; a++) {
        x = out[a]; y = sortkey[a]
        for (b = a - 1; b >= 1 && sortkey[b] > y; b--) {
            out[b + 1] = out[b]; sortkey[b + 1] = sortkey[b]
        }
        out[b + 1] = x; sortkey[b + 1] = y
    }
    for (i = 1; i <= nkeys; i++)
        print out[i]
}
