import json,sys,glob,os
# for each dir: per collective/P/size: best ccoll time (plan), best mpi time, ratio
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    j=json.load(open(f)); res=j['results']
    sizes=sorted({r['size'] for r in res})
    out=[]
    for s in sizes:
        c=[r for r in res if r['size']==s and r['transport']!='mpi']
        m=[r for r in res if r['size']==s and r['transport']=='mpi']
        bc=min(c,key=lambda r:r['time_us']); bm=min(r['time_us'] for r in m)
        out.append(f"{s}:{bc['time_us']:.2f}({bc['algo'][:3]})/{bm:.2f}={bm/bc['time_us']:.2f}x")
    print(os.path.basename(f).replace('.json',''), '  '.join(out))
