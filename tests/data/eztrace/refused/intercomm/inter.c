#include <mpi.h>
#include <stdio.h>
static void work(int n){volatile double x=0;for(int i=0;i<n;i++)x+=i*0.5;}
int main(int argc,char**argv){
  MPI_Init(&argc,&argv);
  int size,rank; MPI_Comm_size(MPI_COMM_WORLD,&size); MPI_Comm_rank(MPI_COMM_WORLD,&rank);
  int color=rank%2; MPI_Comm local; MPI_Comm_split(MPI_COMM_WORLD,color,rank,&local);
  int lr; MPI_Comm_rank(local,&lr);
  MPI_Comm ic; MPI_Intercomm_create(local,0,MPI_COMM_WORLD,color?0:1,99,&ic);
  int rs; MPI_Comm_remote_size(ic,&rs);
  double a[8],b[8];
  for(int it=0;it<4;it++){
    work(10000*(rank+1));
    int peer=lr%rs;
    MPI_Sendrecv(a,8,MPI_DOUBLE,peer,it,b,8,MPI_DOUBLE,peer,it,ic,MPI_STATUS_IGNORE);
    if(color==0){ MPI_Send(a,4,MPI_DOUBLE,peer,50+it,ic); MPI_Recv(b,4,MPI_DOUBLE,peer,60+it,ic,MPI_STATUS_IGNORE);}
    else { MPI_Recv(b,4,MPI_DOUBLE,peer,50+it,ic,MPI_STATUS_IGNORE); MPI_Send(a,4,MPI_DOUBLE,peer,60+it,ic);}
    MPI_Request r[2];
    MPI_Isend(a,2,MPI_DOUBLE,peer,70,ic,&r[0]); MPI_Irecv(b,2,MPI_DOUBLE,peer,70,ic,&r[1]);
    MPI_Waitall(2,r,MPI_STATUSES_IGNORE);
    /* intercomm collectives: group 0 root rank 0 bcasts to group 1 */
    if(color==0) MPI_Bcast(a,8,MPI_DOUBLE,lr==0?MPI_ROOT:MPI_PROC_NULL,ic);
    else MPI_Bcast(a,8,MPI_DOUBLE,0,ic);
    MPI_Allreduce(a,b,8,MPI_DOUBLE,MPI_SUM,ic);
    MPI_Barrier(ic);
  }
  MPI_Comm m; MPI_Intercomm_merge(ic,color,&m);
  double z=rank; MPI_Allreduce(MPI_IN_PLACE,&z,1,MPI_DOUBLE,MPI_SUM,m);
  if(rank==0)printf("inter ok %g\n",z);
  MPI_Comm_free(&m); MPI_Comm_free(&ic); MPI_Comm_free(&local);
  MPI_Finalize(); return 0;}
