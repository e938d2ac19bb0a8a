# Message rate against thread pairs T, one line per configuration, for one
# host.  bench/plot.sh writes the data file and calls
#     gnuplot -e "host='openmpi'; datafile='...'; outfile='...'; cores=2" plot.gnuplot
# Data file: a header line "T raw global-spin ... everywhere", then one row
# per T with the median M msg/s of each configuration (NaN = no result).
if (!exists("host"))     host = "openmpi"
if (!exists("datafile")) datafile = "results/multirate-".host.".dat"
if (!exists("outfile"))  outfile = "results/multirate-".host.".png"
if (!exists("cores"))    cores = 2
if (!exists("tmax"))     tmax = 8

set terminal pngcairo size 960,640 noenhanced font ",11"
set output outfile
set datafile missing "NaN"
set title sprintf("Multirate pairwise, %s: median message rate vs thread pairs (%d cores; 2T busy entities)", host, cores)
set xlabel "pairs T (threads per rank; ranks/2 for MPI everywhere)"
set ylabel "M msg/s (all pairs, log scale)"
set logscale x 2
set xrange [0.8:tmax * 1.25]
set logscale y 10
set xtics (1, 2, 4, 8, 16, 32, 64)
set grid xtics ytics mytics
set key outside right top vertical
set style data linespoints
# The region where 2T entities exceed the cores.
set arrow 1 from cores/2.0, graph 0 to cores/2.0, graph 1 nohead dashtype 3 lc rgb "gray40"
set label 1 "oversubscribed ->" at cores/2.0, graph 0.04 offset 0.5,0 tc rgb "gray40"

# Columns 2..9: raw, global-{spin,block,adaptive}, vci-{spin,block,adaptive}, everywhere
plot datafile using 1:2 title columnhead lw 3 lc rgb "black" pt 7, \
     ''       using 1:3 title columnhead lc rgb "#1f77b4" dt 1 pt 5, \
     ''       using 1:4 title columnhead lc rgb "#1f77b4" dt 2 pt 4, \
     ''       using 1:5 title columnhead lc rgb "#1f77b4" dt 4 pt 13, \
     ''       using 1:6 title columnhead lc rgb "#d62728" dt 1 pt 5, \
     ''       using 1:7 title columnhead lc rgb "#d62728" dt 2 pt 4, \
     ''       using 1:8 title columnhead lc rgb "#d62728" dt 4 pt 13, \
     ''       using 1:9 title columnhead lw 3 lc rgb "#2ca02c" dt 1 pt 9
