/* movement.cl - (being written) */
